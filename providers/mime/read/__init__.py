"""Reading received mail: the bounded MIME walk, display headers and text, attachments."""

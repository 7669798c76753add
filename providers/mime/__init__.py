"""MIME for mail: the shared codecs and HTML renderer here; read/, compose/ and draft/ use them."""

"""One send after its claim: attempt marker, network, commit point, outcome and Sent filing,
written against a small Submitter protocol; plus recovery of what dead dispatchers left."""

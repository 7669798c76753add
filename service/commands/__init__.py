"""The `angelos` subcommands beside serve and ledger: the first-party keys, the provider grants,
the demo."""

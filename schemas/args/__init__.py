"""Tool inputs: one msgspec Struct per action, tagged by `action`: the source of wire truth."""

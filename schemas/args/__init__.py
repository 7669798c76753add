"""Tool inputs: one msgspec Struct per action, tagged by `action`; the single source of wire truth."""

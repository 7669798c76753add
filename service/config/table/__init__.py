"""The variable table: one declared entry per variable, its typed rule, and the docs it renders."""

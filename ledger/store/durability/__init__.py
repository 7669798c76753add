"""Whether the store can be trusted to remember: the durability rule, the readings taken while
serving, the startup check, and the witness that catches a store that went back in time."""

"""Human approval of a send: the paths a call offers to reach a person, and the gate itself."""

//! Register allocation from PTX virtual registers to physical registers, and uniformity.

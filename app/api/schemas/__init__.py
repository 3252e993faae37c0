"""Wire schemas (msgspec), one module per area. Constraints here give 400s before any
service code runs."""

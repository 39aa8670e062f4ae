"""The validation study: DiskSim's measured drives replayed on blksim's drive model and
scored with the demerit figure beside DiskSim 4.0's own (docs/validation.md)."""

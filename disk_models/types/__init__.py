"""The built-in device types, one module each, registered with `blksim.disk_models.registry`
when imported: `mechanical` (the default: a drive preset or file, DiskSim mode included),
`service_law` (a queueing-theory device) and `raid` (a hardware RAID controller)."""

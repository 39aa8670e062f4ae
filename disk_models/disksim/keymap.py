"""Where each DiskSim 4.0 ``disksim_disk`` parameter goes in a blksim drive TOML.

``CONTROLLER`` maps a parameter to ``(table, key, kind)``; kind ``ms`` is a time in ms,
``flag`` a DiskSim 0/1 switch (a TOML boolean), ``int`` / ``float`` a plain number.
``IGNORED`` lists the parameters blksim reads but does not use, with the reason that
goes into the import warning. Parameter names are DiskSim's (disksim_disk.modspec).
"""

from __future__ import annotations

CONTROLLER = {
    "Per-request overhead time": ("overheads", "per_request_ms", "ms"),
    "Time scale for overheads": ("overheads", "time_scale", "float"),
    "Bulk sector transfer time": ("overheads", "bus_sector_ms", "ms"),
    "Hold bus entire read xfer": ("overheads", "hold_bus_entire_read", "flag"),
    "Hold bus entire write xfer": ("overheads", "hold_bus_entire_write", "flag"),
    "Never disconnect": ("overheads", "never_disconnect", "flag"),
    "Read hit over. after read": ("overheads", "read_hit_after_read_ms", "ms"),
    "Read hit over. after write": ("overheads", "read_hit_after_write_ms", "ms"),
    "Read miss over. after read": ("overheads", "read_miss_after_read_ms", "ms"),
    "Read miss over. after write": ("overheads", "read_miss_after_write_ms", "ms"),
    "Write hit over. after read": ("overheads", "write_hit_after_read_ms", "ms"),
    "Write hit over. after write": ("overheads", "write_hit_after_write_ms", "ms"),
    "Write miss over. after read": ("overheads", "write_miss_after_read_ms", "ms"),
    "Write miss over. after write": ("overheads", "write_miss_after_write_ms", "ms"),
    "Read completion overhead": ("overheads", "read_completion_ms", "ms"),
    "Write completion overhead": ("overheads", "write_completion_ms", "ms"),
    "Data preparation overhead": ("overheads", "data_preparation_ms", "ms"),
    "First reselect overhead": ("overheads", "first_reselect_ms", "ms"),
    "Other reselect overhead": ("overheads", "other_reselect_ms", "ms"),
    "Read disconnect afterread": ("overheads", "read_disconnect_after_read_ms", "ms"),
    "Read disconnect afterwrite": ("overheads", "read_disconnect_after_write_ms", "ms"),
    "Write disconnect overhead": ("overheads", "write_disconnect_ms", "ms"),
    "Minimum seek delay": ("overheads", "minimum_seek_delay_ms", "ms"),
    "Enable caching in buffer": ("cache", "enabled", "flag"),
    "Number of buffer segments": ("cache", "segments", "int"),
    "Maximum number of write segments": ("cache", "write_segments", "int"),
    "Segment size (in blks)": ("cache", "segment_size_sectors", "int"),
    "Use separate write segment": ("cache", "separate_write_segment", "flag"),
    "Low (write) water mark": ("cache", "low_water_mark", "float"),
    "High (read) water mark": ("cache", "high_water_mark", "float"),
    "Set watermark by reqsize": ("cache", "watermark_by_request_size", "flag"),
    "Calc sector by sector": ("cache", "calc_sector_by_sector", "flag"),
    "Buffer continuous read": ("cache", "continuous_read", "int"),
    "Minimum read-ahead (blks)": ("cache", "read_ahead_min_sectors", "int"),
    "Maximum read-ahead (blks)": ("cache", "read_ahead_max_sectors", "int"),
    "Read-ahead over requested": ("cache", "read_ahead_over_requested", "int"),
    "Read-ahead on idle hit": ("cache", "read_ahead_on_idle_hit", "flag"),
    "Read any free blocks": ("cache", "read_any_free_blocks", "flag"),
    "Fast write level": ("cache", "fast_write_level", "int"),
    "Immediate buffer read": ("cache", "immediate_buffer_read", "flag"),
    "Immediate buffer write": ("cache", "immediate_buffer_write", "flag"),
    "Combine seq writes": ("cache", "combine_seq_writes", "flag"),
    "Stop prefetch in sector": ("cache", "stop_prefetch_in_sector", "flag"),
    "Disconnect write if seek": ("cache", "disconnect_write_if_seek", "flag"),
    "Write hit stop prefetch": ("cache", "write_hit_stop_prefetch", "flag"),
    "Read directly to buffer": ("cache", "read_directly_to_buffer", "flag"),
    "Immed transfer partial hit": ("cache", "immediate_transfer_partial_hit", "flag"),
    "Allow read hits on write data": ("cache", "allow_read_hits_on_write_data", "flag"),
    "Allow almost read hits": ("cache", "allow_almost_read_hits", "flag"),
    "Allow sneaky full read hits": ("cache", "allow_sneaky_full_read_hits", "flag"),
    "Allow sneaky partial read hits": ("cache", "allow_sneaky_partial_read_hits", "flag"),
    "Allow sneaky intermediate read hits": ("cache", "allow_sneaky_intermediate_read_hits",
                                            "flag"),
    "Allow write prebuffering": ("cache", "allow_write_prebuffering", "flag"),
    "Preseeking level": ("cache", "preseeking_level", "int"),
}

CONTROLLER.update({
    "Extra write disconnect": ("overheads", "extra_write_disconnect", "flag"),
    "Extradisc command overhead": ("overheads", "extradisc_command_ms", "ms"),
    "Extradisc disconnect overhead": ("overheads", "extradisc_disconnect_ms", "ms"),
    "Extradisc inter-disconnect delay": ("overheads", "extradisc_inter_disconnect_ms", "ms"),
    "Extradisc 2nd disconnect overhead": ("overheads", "extradisc_second_disconnect_ms", "ms"),
    "Extradisc seek delta": ("overheads", "extradisc_seek_delta_ms", "ms"),
})

IGNORED = {
    "Print stats": "statistics output switch; blksim reports its own figures",
    "Avg sectors per cylinder": "a hint for DiskSim's cylinder-mapping heuristics; blksim uses "
                                "the exact layout",
}

# the on-disk queue's scheduler block (disksim_ioqueue): only the policy is used
QUEUE_IGNORED = "detail of DiskSim's ioqueue scheduler; blksim's drive queue takes only the policy"

# DiskSim mechanical parameters blksim reads but does not use, by reason
MECH_IGNORED_FOR_TABLE = "the seek curve comes from 'Full seek curve' (DiskSim does the same)"

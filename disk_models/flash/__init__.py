"""The flash drive's state and timing.

State (the flash translation layer; no time passes in these modules):

- `blksim.disk_models.flash.geometry`: channels, chips, dies, planes, blocks and pages;
  global numbering; logical pages from the over-provisioning.
- `blksim.disk_models.flash.ftl`: the page-mapping FTL (allocation over planes, the SLC
  cache, garbage collection, TRIM, wear counts) over numpy arrays.
- `blksim.disk_models.flash.gc_policy`: victim choice (greedy, cost-benefit) and the
  free-block thresholds.
- `blksim.disk_models.flash.precondition`: fresh, full and steady start states set up
  directly, without simulating the fill.
- `blksim.disk_models.flash.mapping_cache`: the cached mapping table (DFTL), an LRU of
  translation pages.
"""

"""Workloads: trace readers and writers, and synthetic fio-style jobs.

Plain Python: nothing here imports simpy or the simulation engine.
"""

"""The fleet layer: gpuutil's series beside dcgm-exporter's in Prometheus.

- :mod:`gpuutil.fleet.identity`: who a process is, from inside it (the
  ``job_id`` label, and each GPU's ``UUID`` as dcgm-exporter spells it);
  used by the Prometheus exporter (gpuutil.export.prometheus_families).
- :mod:`gpuutil.fleet.queries`: the PromQL of ``gpuutil fleet``, over the
  recording rules in deploy/prometheus/gpuutil-rules.yml.
- :mod:`gpuutil.fleet.client`: the Prometheus HTTP API (urllib), errors as
  one line.
- :mod:`gpuutil.fleet.report`: ``gpuutil fleet``: the figures per job and
  the text table; :mod:`gpuutil.fleet.html`: its HTML page.

Nothing here is imported by ``import gpuutil``; docs/fleet.md says what
each rule means and how allocation, OEE and cost are defined.
"""

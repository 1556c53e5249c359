"""Serving a trained model: a small HTTP inference server with dynamic batching
(:mod:`~gpulab.serving.server`), a bounded load test on loopback (:mod:`~gpulab.serving.loadtest`)
and energy with stated boundaries (:mod:`~gpulab.serving.energy`). Standard library only."""

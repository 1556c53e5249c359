"""Serving a trained model: the course's dynamic batcher (:mod:`~gpulab.serving.batcher`)
behind aiohttp's HTTP server (:mod:`~gpulab.serving.server`), bounded open- and closed-loop load
tests on loopback with aiohttp's client (:mod:`~gpulab.serving.loadtest`) and energy with stated
boundaries (:mod:`~gpulab.serving.energy`)."""

"""The cost model: what a checked plan costs (docs/architecture.md, "The model").

The α-β core and the formula library (``costs``), the measured kernel curves (``kernels``), the program of
one step (``program``), lowering a plan to it (``lower``), pricing it (``analysis``), training's and
serving's own models (``training``, ``serve``, ``online`` with the engine simulator ``simulate``), the phases'
functions (``phases``), cost and power (``economics``) and a training target (``target``).

It prices plans the checker has resolved and never imports the front end (the parser, ``ccost.check``):
the import contracts of pyproject.toml say so. The vocabulary the checker shares with it (``ccost.axes``,
``ccost.collectives``, ``ccost.layout_rules``) and the drivers above it (``ccost.search``,
``ccost.capacity``, ``ccost.evaluate``) stay beside the package.
"""

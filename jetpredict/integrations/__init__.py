"""Integrations of jetpredict with other frameworks; each one needs its own extra.

- :mod:`jetpredict.integrations.flower`: a Flower strategy that picks clients and power modes from fleet
  plans, and the client-side mod that runs each round at its planned mode and measures it
  (``pip install 'jetpredict[flower]'``).

Nothing in the rest of the package imports this package.
"""

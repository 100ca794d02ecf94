"""Measures a few minibatches of a DNN per power mode, on a Jetson, any host, or the digital twin."""

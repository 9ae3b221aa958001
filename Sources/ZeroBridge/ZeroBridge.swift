import ZeroMQ

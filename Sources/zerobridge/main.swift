import ZeroBridge

"""Multi-process chaos tests: real beats, a real store and a real broker, with faults injected."""

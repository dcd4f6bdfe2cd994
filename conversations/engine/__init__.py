"""The turn engine: runs claimed turns as coroutines on one event loop per worker process."""

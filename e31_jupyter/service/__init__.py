"""The service: the store (the only module that writes SQL), the queue (what users ask for), the
scheduler (starting, watching, finishing and adopting jobs) and the views the API answers with."""

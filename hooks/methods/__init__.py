"""Hooks of the SSL methods: teachers, queues, prototypes and centering, one per concern."""

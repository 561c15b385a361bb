"""The application layer: the ``caffeine`` command line, its sub-commands and the demo.

Layer: application (commands), the top.
"""

"""The SSL methods hookbus ships, one entry module per method (``hookbus.methods``).

Each module registers one :class:`~hookbus.engine.methods.entries.MethodSpec`: the method's loss,
the model parts it reads, its views, its config section and its hooks. The entries are
torch-free data (they import only ``hookbus.engine``), so the config loads them when it
is imported (:func:`hookbus.engine.methods.entries.load_methods`) and validates a recipe without
torch. Adding a method is adding a module here (docs/tutorials/add-an-ssl-method.md).
"""

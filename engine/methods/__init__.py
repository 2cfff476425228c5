"""The method entries' room: an SSL method declared as torch-free data (``entries``: the
registry of :class:`~hookbus.engine.methods.entries.MethodSpec`) and the rules that
compose a method with a backbone, images and a machine (``composition``). The config's
schema is built from these entries; the entries themselves live in ``hookbus.methods``.
"""

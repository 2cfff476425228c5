"""Each shipped SSL method's settings, one torch-free module per method: the sections
``loss.<method>`` (and a method's own ``model.<part>``) that the whole config
(:mod:`hookbus.parts.config`) declares field by field, so a type checker sees them where
they are read. The method entries (``hookbus.methods``) and the parts read them."""

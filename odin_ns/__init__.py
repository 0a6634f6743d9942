"""odin-ns: Odin primitive-level synchronization for nerfstudio Gaussian splatting."""

__version__ = "0.1.0"

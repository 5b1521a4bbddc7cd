"""Result files: the schema (``schema``), loading and folders (``store``) and bounded,
atomic file access (``files``). Importing this package imports nothing else."""

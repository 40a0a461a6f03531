"""Export and import of the whole memory as JSON Lines (docs/export-format.md).

``records`` is the format (pure), ``exporter`` streams a graph out page by page, ``importer`` checks a file
whole and then writes it in bounded transactions, ``staging`` names the files an import reads from the data
directory.
"""

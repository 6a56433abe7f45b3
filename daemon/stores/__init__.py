"""The catalog and the indexes derived from it (FAISS, the keyword index).

Deliberately empty: importing any store runs this file first, so an import here would sit under
every store (``projection`` has what each derived index provides).
"""

"""The search's fitting runners: cross-validated fits that reproduce the weights and cuts in `SearchConfig`.

They import the search server (`panama_law`) to replay its rankings on evaluation sets; the server never imports
them. See README.md in this folder for what each one fits and how to run it.
"""

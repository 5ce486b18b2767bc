"""Research beside the product: notes of what was tried, and the runners that produced the shipped constants.

Not installed with the package and never imported by `panama_law` or `agent`; run from a checkout's root.
"""

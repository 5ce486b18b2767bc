"""Users' journeys, walked the way a person walks them: the real commands, the real page, nothing pre-built."""

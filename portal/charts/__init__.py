"""Plotly figure builders, one module per views module (charts/home.py draws for views/home.py, ...).

Pure: numbers in, figure dicts out (no Django, no I/O). A view puts the dict in its context and the
template embeds it with `{{ fig|json_script:"id" }}`; static/js/charts.js draws it.
"""

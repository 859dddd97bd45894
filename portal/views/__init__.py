"""Web views, one module per area (home, intake, sizing, live, planning); urls_<area>.py import them."""

"""JSON API of the launch intake workflow (docs/contract.md §7), on the same services as the pages."""

"""HTTP route blueprints, one module per resource."""

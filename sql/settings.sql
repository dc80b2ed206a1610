-- durable's settings: each one's built-in default, unit, bounds and who may change it
-- (superuser, sighup, postmaster), as api.md and the README's Settings table name them.
-- A default changed by mistake fails here, whatever the test cluster sets.
SELECT name, boot_val, unit, vartype, min_val, max_val, context
  FROM pg_catalog.pg_settings
 WHERE name LIKE 'durable.%'
 ORDER BY name;

-- KEYS[1] grants hash. Prunes expired grants and returns {'ok', field, json, field, json, ...}.
return prune_grants(KEYS[1], {'ok'}) or {'corrupt'}

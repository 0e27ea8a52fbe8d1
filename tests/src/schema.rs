//! Checking JSON against the schemas in docs/cli.schema.json: the subset of JSON Schema
//! that file uses (type, enum, const, properties, required, additionalProperties: false,
//! items, minItems, maxItems, minimum, minLength, maxLength, oneOf, $ref). A keyword
//! outside that subset is an error, so the file cannot say more than is checked.

use serde_json::Value;

/// The schema file of the command line's JSON.
pub fn cli_schemas() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/cli.schema.json");
    let text = std::fs::read_to_string(path).expect("docs/cli.schema.json");
    serde_json::from_str(&text).expect("docs/cli.schema.json is JSON")
}

/// Checks `value` against the output schema `name` (a key of `outputs`); the error lists
/// every place it differs.
pub fn check(root: &Value, name: &str, value: &Value) -> Result<(), String> {
    let schema = root.pointer(&format!("/outputs/{}", name.replace('~', "~0").replace('/', "~1")));
    let schema = schema.ok_or_else(|| format!("no schema for output {name:?}"))?;
    let mut errors = Vec::new();
    validate(root, schema, value, "$", &mut errors);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!("{name}: {}", errors.join("; ")))
    }
}

fn type_matches(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        other => panic!("unknown type {other:?} in schema"),
    }
}

fn validate(root: &Value, schema: &Value, v: &Value, at: &str, errors: &mut Vec<String>) {
    let obj = schema.as_object().expect("a schema is an object");
    for (key, s) in obj {
        match key.as_str() {
            "$ref" => {
                let target = s.as_str().and_then(|r| r.strip_prefix('#')).and_then(|p| root.pointer(p));
                let target = target.unwrap_or_else(|| panic!("unresolved $ref {s}"));
                validate(root, target, v, at, errors);
            }
            "type" => {
                let ok = match s {
                    Value::String(t) => type_matches(t, v),
                    Value::Array(ts) => ts.iter().any(|t| type_matches(t.as_str().unwrap(), v)),
                    _ => panic!("bad type {s}"),
                };
                if !ok {
                    errors.push(format!("{at}: {v} is not of type {s}"));
                }
            }
            "enum" => {
                if !s.as_array().unwrap().contains(v) {
                    errors.push(format!("{at}: {v} is not one of {s}"));
                }
            }
            "const" => {
                if s != v {
                    errors.push(format!("{at}: {v} is not {s}"));
                }
            }
            "properties" => {
                if let Some(o) = v.as_object() {
                    for (k, sub) in s.as_object().unwrap() {
                        if let Some(x) = o.get(k) {
                            validate(root, sub, x, &format!("{at}.{k}"), errors);
                        }
                    }
                }
            }
            "required" => {
                if let Some(o) = v.as_object() {
                    for k in s.as_array().unwrap() {
                        if !o.contains_key(k.as_str().unwrap()) {
                            errors.push(format!("{at}: missing {k}"));
                        }
                    }
                }
            }
            "additionalProperties" => {
                assert_eq!(s, &Value::Bool(false), "only additionalProperties: false is supported");
                let known = obj.get("properties").and_then(|p| p.as_object());
                if let Some(o) = v.as_object() {
                    for k in o.keys() {
                        if !known.is_some_and(|p| p.contains_key(k)) {
                            errors.push(format!("{at}: {k:?} is not in the schema"));
                        }
                    }
                }
            }
            "items" => {
                if let Some(a) = v.as_array() {
                    for (i, x) in a.iter().enumerate() {
                        validate(root, s, x, &format!("{at}[{i}]"), errors);
                    }
                }
            }
            "minItems" | "maxItems" => {
                if let Some(a) = v.as_array() {
                    let n = s.as_u64().unwrap() as usize;
                    if (key == "minItems" && a.len() < n) || (key == "maxItems" && a.len() > n) {
                        errors.push(format!("{at}: {} items, {key} {n}", a.len()));
                    }
                }
            }
            "minLength" | "maxLength" => {
                if let Some(t) = v.as_str() {
                    let n = s.as_u64().unwrap() as usize;
                    let len = t.chars().count();
                    if (key == "minLength" && len < n) || (key == "maxLength" && len > n) {
                        errors.push(format!("{at}: {t:?} has {len} characters, {key} {n}"));
                    }
                }
            }
            "minimum" => {
                if let Some(x) = v.as_f64() {
                    if x < s.as_f64().unwrap() {
                        errors.push(format!("{at}: {x} < minimum {s}"));
                    }
                }
            }
            "oneOf" => {
                let matching = s
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|sub| {
                        let mut e = Vec::new();
                        validate(root, sub, v, at, &mut e);
                        e.is_empty()
                    })
                    .count();
                if matching != 1 {
                    errors.push(format!("{at}: matches {matching} of the oneOf schemas, not 1"));
                }
            }
            "$schema" | "title" | "description" | "$defs" | "outputs" => {}
            other => panic!("schema keyword {other:?} is not checked by this validator"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_validator_finds_drift() {
        let root = json!({"outputs": {"x": {"type": "object", "additionalProperties": false,
            "required": ["a"], "properties": {"a": {"type": "integer", "minimum": 0},
            "b": {"oneOf": [{"type": "null"}, {"enum": ["s"]}]}}}}});
        assert!(check(&root, "x", &json!({"a": 1, "b": null})).is_ok());
        assert!(check(&root, "x", &json!({"a": 1, "b": "s"})).is_ok());
        assert!(check(&root, "x", &json!({"a": -1})).is_err());
        assert!(check(&root, "x", &json!({"a": 1, "c": 2})).is_err());
        assert!(check(&root, "x", &json!({"b": null})).is_err());
        assert!(check(&root, "x", &json!({"a": 1.5})).is_err());
        assert!(check(&root, "x", &json!({"a": 1, "b": "t"})).is_err());
    }

    #[test]
    fn the_schema_file_uses_only_checked_keywords() {
        let root = cli_schemas();
        for name in root["outputs"].as_object().unwrap().keys() {
            // Validating null walks every keyword of the schema's top level and its refs.
            let _ = check(&root, name, &Value::Null);
        }
        for (_, def) in root["$defs"].as_object().unwrap() {
            let mut e = Vec::new();
            validate(&root, def, &Value::Null, "$", &mut e);
        }
    }
}

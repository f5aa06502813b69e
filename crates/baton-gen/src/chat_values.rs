//! JSON values as a chat template sees them: objects as mappings whose
//! keys keep their order (a call's arguments and a tool's parameters as
//! the client wrote them, as Python's dicts keep them in Hugging Face's
//! renderer), arrays as sequences, numbers as integers where they are.

use std::sync::Arc;

use minijinja::value::{Enumerator, Object, ObjectExt, Value};
use serde_json::Value as JsonValue;

/// A mapping of string keys in their order.
#[derive(Debug)]
struct OrderedMap(Vec<(String, Value)>);

impl Object for OrderedMap {
    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let key = key.as_str()?;
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        self.mapped_enumerator(|this| Box::new(this.0.iter().map(|(k, _)| Value::from(k.as_str()))))
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(self.0.len())
    }
}

/// `members` as a mapping in their order (for a key given twice, the
/// first).
pub(crate) fn ordered_map(members: Vec<(String, Value)>) -> Value {
    Value::from_object(OrderedMap(members))
}

/// `value` as the template sees it.
pub(crate) fn json_value(value: &JsonValue) -> Value {
    match value {
        JsonValue::Null => Value::from(()),
        JsonValue::Bool(b) => Value::from(*b),
        JsonValue::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => Value::from(i),
            (None, Some(u), _) => Value::from(u),
            (None, None, Some(f)) => Value::from(f),
            (None, None, None) => Value::from(n.to_string()),
        },
        JsonValue::String(s) => Value::from(s.as_str()),
        JsonValue::Array(items) => Value::from_iter(items.iter().map(json_value)),
        JsonValue::Object(members) => ordered_map(members.iter().map(|(k, v)| (k.clone(), json_value(v))).collect()),
    }
}

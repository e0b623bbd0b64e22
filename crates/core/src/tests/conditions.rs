//! Which of `template.yaml`'s resources a stack creates with given parameters: its `Conditions`
//! evaluated over the parameters' defaults with the values set over them. Read by the all-in
//! cost (what a stack with no traffic pays a month) and, by path, by the command line's
//! template tests (which alarms each `Monitoring` setting makes).

use std::collections::HashMap;

use yaml_serde::Value;

/// A stack of `template.yaml`: its parameters' values.
pub struct Stack<'t> {
    template: &'t Value,
    parameters: HashMap<String, String>,
}

impl<'t> Stack<'t> {
    /// The stack `template` makes with its parameters' defaults, `set` over them.
    pub fn new(template: &'t Value, set: &[(&str, &str)]) -> Self {
        let mut parameters: HashMap<String, String> = template["Parameters"]
            .as_mapping()
            .expect("template.yaml has Parameters")
            .iter()
            .map(|(name, p)| (name.as_str().unwrap().to_owned(), scalar(&p["Default"])))
            .collect();
        for (name, value) in set {
            assert!(
                parameters.contains_key(*name),
                "template.yaml has no parameter {name}"
            );
            parameters.insert((*name).to_owned(), (*value).to_owned());
        }
        Self {
            template,
            parameters,
        }
    }

    /// A parameter's value.
    pub fn parameter(&self, name: &str) -> &str {
        self.parameters
            .get(name)
            .unwrap_or_else(|| panic!("template.yaml has no parameter {name}"))
    }

    /// Whether the template's condition `name` holds for this stack.
    pub fn holds(&self, name: &str) -> bool {
        let condition = &self.template["Conditions"][name];
        assert!(
            !condition.is_null(),
            "template.yaml has no condition {name}"
        );
        self.eval(condition)
    }

    fn eval(&self, condition: &Value) -> bool {
        let Value::Tagged(f) = condition else {
            panic!("a condition function, not {condition:?}")
        };
        let args = || f.value.as_sequence().expect("a condition's arguments");
        if f.tag == "Equals" {
            self.value(&args()[0]) == self.value(&args()[1])
        } else if f.tag == "Not" {
            !self.eval(&args()[0])
        } else if f.tag == "And" {
            args().iter().all(|c| self.eval(c))
        } else if f.tag == "Or" {
            args().iter().any(|c| self.eval(c))
        } else if f.tag == "Condition" {
            self.holds(f.value.as_str().expect("a condition's name"))
        } else {
            panic!("no evaluation of {}", f.tag)
        }
    }

    fn value(&self, v: &Value) -> String {
        match v {
            Value::Tagged(r) if r.tag == "Ref" => self
                .parameter(r.value.as_str().expect("a parameter's name"))
                .to_owned(),
            other => scalar(other),
        }
    }

    /// The resources of type `kind` this stack creates, by logical id.
    pub fn resources(&self, kind: &str) -> Vec<(&'t str, &'t Value)> {
        self.template["Resources"]
            .as_mapping()
            .expect("template.yaml has Resources")
            .iter()
            .filter(|(_, r)| r["Type"].as_str() == Some(kind))
            .filter(|(_, r)| r["Condition"].as_str().is_none_or(|c| self.holds(c)))
            .map(|(name, r)| (name.as_str().unwrap(), r))
            .collect()
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => String::new(),
        other => panic!("a parameter's value, not {other:?}"),
    }
}

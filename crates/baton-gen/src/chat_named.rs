//! Chat formats known by name, as llama-server's `--chat-template NAME`
//! takes them: each written here as a Jinja template from the format's
//! documented turn markers. None writes BOS: [`ChatTemplate::encode`]
//! puts the model's in front when the model adds one.
//!
//! [`ChatTemplate::encode`]: crate::ChatTemplate::encode

use crate::chat::CHATML;

/// Llama 3's turns: `<|start_header_id|>ROLE<|end_header_id|>`, a blank
/// line, the content, `<|eot_id|>`; the assistant's header opens the
/// answer.
const LLAMA3: &str = "{% for message in messages %}\
<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n{{ message['content'] }}<|eot_id|>\
{% endfor %}\
{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}";

/// Command R's turns: `<|START_OF_TURN_TOKEN|>`, the role's token
/// (`<|SYSTEM_TOKEN|>`, `<|USER_TOKEN|>`, `<|CHATBOT_TOKEN|>`), the
/// content, `<|END_OF_TURN_TOKEN|>`; a chatbot turn opens the answer.
const COMMAND_R: &str = "{% for message in messages %}<|START_OF_TURN_TOKEN|>\
{% if message['role'] == 'system' %}<|SYSTEM_TOKEN|>\
{% elif message['role'] == 'user' %}<|USER_TOKEN|>\
{% elif message['role'] == 'assistant' %}<|CHATBOT_TOKEN|>\
{% else %}{{ raise_exception('command-r has no role ' + message['role']) }}{% endif %}\
{{ message['content'] }}<|END_OF_TURN_TOKEN|>\
{% endfor %}\
{% if add_generation_prompt %}<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>{% endif %}";

/// The names served, in the order they are listed.
pub const TEMPLATE_NAMES: [&str; 3] = ["chatml", "llama3", "command-r"];

/// The Jinja source of the format called `name`, if it is one of
/// [`TEMPLATE_NAMES`].
pub fn named_template(name: &str) -> Option<&'static str> {
    match name {
        "chatml" => Some(CHATML),
        "llama3" => Some(LLAMA3),
        "command-r" => Some(COMMAND_R),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ChatTemplate, Message};

    fn render(name: &str, messages: &[Message], add_generation_prompt: bool) -> String {
        let source = named_template(name).unwrap_or_else(|| panic!("{name} is served"));
        let template = ChatTemplate::new(source, "<s>", "</s>").expect("compiles");
        template.render(messages, add_generation_prompt).expect("renders")
    }

    #[test]
    fn named_formats_write_their_turn_markers() {
        let messages = [Message::system("Be brief."), Message::user("Hi"), Message::assistant("Hello")];
        assert_eq!(
            render("llama3", &messages[..2], true),
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>\
             <|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>\
             <|start_header_id|>assistant<|end_header_id|>\n\n"
        );
        assert_eq!(
            render("command-r", &messages, false),
            "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>Be brief.<|END_OF_TURN_TOKEN|>\
             <|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hi<|END_OF_TURN_TOKEN|>\
             <|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>Hello<|END_OF_TURN_TOKEN|>"
        );
        assert!(render("command-r", &messages[1..2], true).ends_with("<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"));
        assert_eq!(render("chatml", &messages[1..2], true), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
        let template = ChatTemplate::new(named_template("command-r").expect("served"), "", "").expect("compiles");
        assert!(template.render(&[Message::new("tool", "x")], true).is_err(), "an unknown role is refused");
        assert!(TEMPLATE_NAMES.iter().all(|name| named_template(name).is_some()));
        assert_eq!(named_template("llama-3"), None);
    }
}

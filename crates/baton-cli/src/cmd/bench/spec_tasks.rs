//! The tasks of `baton bench spec`: two whose answers repeat their prompt
//! (a code file rewritten with one change, a text quoted) and one whose
//! answer does not. The file and the texts are Baton's own.

/// A task: its name and the user message asking for it.
pub struct Task {
    /// Its name in the table.
    pub name: &'static str,
    /// The user message.
    pub message: String,
    /// The sampling temperature (0: greedy; else seeded sampling with
    /// top-k 40, which a small model's greedy loops do not repeat).
    pub temperature: f32,
}

/// The code file the `code` task rewrites.
const CODE: &str = r#"import math


class Shape:
    """A plane figure with an area and a perimeter."""

    def area(self):
        raise NotImplementedError

    def perimeter(self):
        raise NotImplementedError


class Circle(Shape):
    def __init__(self, radius):
        self.radius = radius

    def area(self):
        return math.pi * self.radius * self.radius

    def perimeter(self):
        return 2 * math.pi * self.radius


class Rectangle(Shape):
    def __init__(self, width, height):
        self.width = width
        self.height = height

    def area(self):
        return self.width * self.height

    def perimeter(self):
        return 2 * (self.width + self.height)


def total_area(shapes):
    return sum(shape.area() for shape in shapes)
"#;

/// The text the `quote` task quotes.
const TEXT: &str = "The harbour wakes before the town does. At five the first boats \
leave, their engines low, their lights swinging as they pass the breakwater. \
By six the fish market is loud with crates and ice and prices called across \
the hall. The bakers on the quay have been at work since three, and the smell \
of bread drifts over the water to the men mending nets on the slipway. When \
the church bell rings seven, the shutters of the cafes go up one after \
another, and the day belongs to everyone.";

/// The request of the tasks whose answers do not repeat the prompt.
const STORY: &str = "Write a short story about a lighthouse keeper who finds a message in a bottle.";

/// The tasks, in the table's order.
pub fn tasks() -> Vec<Task> {
    vec![
        Task {
            name: "code",
            message: format!(
                "Rewrite this Python file with the class `Rectangle` renamed to `Box`. \
                 Output the whole file and nothing else.\n\n```python\n{CODE}```"
            ),
            temperature: 0.0,
        },
        Task { name: "quote", message: format!("Quote this paragraph word for word:\n\n{TEXT}"), temperature: 0.0 },
        Task { name: "free", message: STORY.into(), temperature: 0.0 },
        Task { name: "free-sampled", message: STORY.into(), temperature: 1.0 },
    ]
}

import Foundation

extension Scenario {
    /// Why `name` cannot name a scenario, or nil. A name is data that also names the artifact folder,
    /// so it holds only letters, digits, `-`, `_` and `.`, is not empty and is not only dots (`.`,
    /// `..` would be the folder itself or its parent). The runner makes any name — one built in code
    /// too — a safe, unique folder all the same (`OutputPath.safeComponent`, `makeUniqueFolder`).
    public static func nameProblem(_ name: String) -> String? {
        if name.isEmpty {
            return "is empty; give the scenario a name (letters, digits, '-', '_', '.') or leave the key out to use the file's name"
        }
        guard name.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) }) else {
            return "'\(name)' may hold only letters, digits, '-', '_' and '.' (it names the artifact folder)"
        }
        if name.allSatisfy({ $0 == "." }) {
            return "'\(name)' is only dots, which would name the artifact folder itself or its parent; use a letter or digit"
        }
        return nil
    }
}

GREETING = "imported from the installed package"

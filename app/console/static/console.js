// The console's script: a file of its own, so the Content-Security-Policy allows no inline
// script or event handler (app/console/headers.py).

// Filters apply as soon as a select or checkbox changes.
document.querySelectorAll("form.filters select, form.filters input[type=checkbox]")
  .forEach(el => el.addEventListener("change", () => el.form.submit()));

// "Open a user" goes to the user's page, the id escaped as a path segment.
const openUser = document.getElementById("open-user-form");
if (openUser) {
  openUser.addEventListener("submit", event => {
    event.preventDefault();
    location.href = "/console/users/" + encodeURIComponent(openUser.elements.user.value);
  });
}
